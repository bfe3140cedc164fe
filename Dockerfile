# One image for every scheduler process (web, scanner, relay, sweeper, effects, cleanup,
# Celery workers and beat); docker-compose.yml picks the command.
FROM python:3.11.10-slim-bookworm
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml ./
RUN pip install .
COPY . .
# Static files (admin, Swagger UI, ReDoc) are part of the image: the web container serves
# them through WhiteNoise without a shared volume or a build step at start.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput --verbosity 0
EXPOSE 8000
# No control socket: gunicorn's default path is shared by every instance with the same home.
CMD ["gunicorn", "scheduler_project.wsgi", "--bind", "0.0.0.0:8000", "--no-control-socket"]
