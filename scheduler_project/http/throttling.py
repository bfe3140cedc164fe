"""Per-token request rate limit: a burst of API_RATE_LIMIT_BURST requests, refilled at
API_RATE_LIMIT_PER_SECOND (a token bucket, kept as GCRA's one timestamp per token).

The state lives in Django's cache: Redis when REDIS_URL is set, so every web process counts
together; process memory in embedded mode. Like DRF's own throttles it is approximate under
concurrent requests of one token, and it fails open: a cache outage must not stop the API.
"""

import logging
import math
import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

log = logging.getLogger(__name__)


class TokenRateThrottle(BaseThrottle):
    """DRF throttle keyed by the authenticated ApiToken (runs after authentication)."""

    def __init__(self):
        self.wait_seconds = None

    def allow_request(self, request, view):
        rate, burst = settings.API_RATE_LIMIT_PER_SECOND, settings.API_RATE_LIMIT_BURST
        token = request.auth
        if rate <= 0 or token is None:
            return True
        interval = 1.0 / rate
        key = f"rate:{token.id}"
        now = time.time()
        try:
            # The theoretical arrival time: when this token's bucket would be full again.
            arrival = max(cache.get(key) or now, now)
            ahead = arrival - now - (burst - 1) * interval
            if ahead > 0:
                self.wait_seconds = ahead
                return False
            cache.set(key, arrival + interval, timeout=math.ceil(burst * interval) + 1)
        except Exception:  # noqa: BLE001 - fail open: the limit protects the API, it must not stop it
            log.warning("rate limit state unavailable; request allowed", exc_info=True)
        return True

    def wait(self):
        return self.wait_seconds
