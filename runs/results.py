"""Download links for canonical results, with a pin that keeps cleanup away until expiry."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction

from objectstore import download_filename, get_object_store
from runs.authority.objects import object_pin
from kernel.clock import authority_now
from runs.models import ObjectState, Run, RunState, StoredObject
from kernel.errors import InvalidState, NotFound


def result_download(*, tenant, run_id: str, base_url: str) -> dict:
    ttl = settings.RESULT_URL_TTL_SECONDS
    with transaction.atomic():
        run = Run.objects.filter(id=run_id, tenant=tenant).first()
        if run is None:
            raise NotFound("no such run")
        if run.state != RunState.SUCCEEDED:
            raise InvalidState(f"run is {run.state}; a result exists only after success")
        obj = (
            StoredObject.objects.select_for_update()
            .filter(key=run.result_key, version_id=run.result_version_id, state=ObjectState.REFERENCED)
            .first()
        )
        if obj is None:
            raise InvalidState("the result has expired under the retention policy")
        now = authority_now()
        expires_at = now + timedelta(seconds=ttl)
        object_pin(obj, expires_at)
    url = get_object_store().download_url(obj.key, obj.version_id, ttl, base_url, filename=download_filename(obj.filename))
    return {"url": url, "expiresAt": expires_at, "checksum": obj.checksum}
