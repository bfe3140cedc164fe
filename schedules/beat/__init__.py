"""Migration from django-celery-beat (``manage.py import_beat``).

``rules`` turns a PeriodicTask's schedule into one of ours (or says why it cannot),
``instants`` computes what beat itself would fire (with the installed Celery's own code) and
where that differs from ours around DST transitions, ``importer`` plans and applies an import.
"""
