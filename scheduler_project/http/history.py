"""Keyset pages of run history: the cursor pins the first page's watermark as an upper bound,
so runs created while a client pages never make it skip or repeat older ones."""

from runs.selectors import history_watermark, waiting_on_key
from schedules.selectors import unavailable_job_types
from kernel.clock import instant
from kernel.errors import InvalidRequest
from scheduler_project.http.cursors import cursor_instant, decode_cursor, encode_cursor
from scheduler_project.http.representations import run_representation
from scheduler_project.http.views import query_cursor, query_limit


def run_history_body(request, *, scope: str, read_page) -> dict:
    """The `{results, nextCursor, watermark}` body of a history listing bound to `scope`.

    `read_page(upper_bound=, after=, limit=)` reads the runs; it runs after the cursor is
    checked, so a bad cursor is 400 before any 404 the read may raise.
    """
    limit = query_limit(request)
    after = None
    if cursor := query_cursor(request):
        payload = decode_cursor(scope, cursor)
        upper_bound = cursor_instant(payload.get("ub"))
        if not isinstance(payload.get("id"), str):
            raise InvalidRequest("invalid cursor", field="cursor")
        after = (cursor_instant(payload.get("at")), payload["id"])
    else:
        upper_bound = history_watermark()
    page = read_page(upper_bound=upper_bound, after=after, limit=limit + 1)
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        last = page[-1]
        next_cursor = encode_cursor(
            scope, {"ub": upper_bound.isoformat(), "at": last.scheduled_at.isoformat(), "id": last.id}
        )
    unavailable = unavailable_job_types() if any(run.finished_at is None for run in page) else frozenset()
    key_bound = waiting_on_key(page)
    return {
        "results": [run_representation(run, unavailable, key_bound) for run in page],
        "nextCursor": next_cursor,
        "watermark": instant(upper_bound),
    }
