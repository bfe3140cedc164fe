"""Who may use the console (active staff users, Django's auth), what a refused filter
looks like (a 400 page naming it), and the action messages every form post ends with."""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import user_passes_test
from django.shortcuts import redirect, render

from kernel.errors import DomainError
from scheduler_project.http.validation import lookup_id


class BadFilter(ValueError):
    """A query string value the console refuses: answered 400, never 500."""


def staff_only(view):
    @user_passes_test(lambda user: user.is_active and user.is_staff, login_url="console:login")
    @wraps(view)
    def guarded(request, *args, **kwargs):
        # An id in the path that no id could be (a NUL byte, 4 KB) matches nothing: 404.
        kwargs = {name: lookup_id(value) if name.endswith("_id") else value for name, value in kwargs.items()}
        try:
            return view(request, *args, **kwargs)
        except BadFilter as refused:
            return render(request, "console/bad_request.html", {"message": str(refused)}, status=400)

    return guarded


def actor(request) -> str:
    return f"console:{request.user.get_username()}"


def act(request, operation, done: str, back: str):
    """Run one service call for a form post; its domain error becomes a message, not a 500."""
    try:
        operation()
    except DomainError as refused:
        messages.error(request, refused.message)
    else:
        messages.success(request, done)
    return redirect(back)
