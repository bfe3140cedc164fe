"""The answer to a login django-axes refuses (settings, "Logins"), on /admin/login/ and
/console/login/ alike: 429, how long to wait, and the way back to the page."""

import math

from axes.helpers import get_cool_off, get_failure_limit
from django.shortcuts import render


def login_locked_out(request, original_response, credentials):
    cool_off = get_cool_off(request)
    context = {
        "failure_limit": get_failure_limit(request, credentials),
        "minutes": math.ceil(cool_off.total_seconds() / 60),
        "login_page": request.path,
    }
    response = render(request, "login_locked_out.html", context, status=429)
    # At the earliest: each failure during the lockout starts the cool-off again.
    response["Retry-After"] = str(math.ceil(cool_off.total_seconds()))
    return response
