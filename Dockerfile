FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml ./
RUN pip install --no-cache-dir . && rm -rf /root/.cache
COPY . .
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["gunicorn", "scheduler_project.wsgi", "--bind", "0.0.0.0:8000"]
