"""Template filters for the console: an instant in a schedule's zone with the zone named,
never wrapped (`{{ run.scheduled_at|at:zone }}`), and spans between instants."""

from datetime import timezone

from django import template
from django.utils.html import format_html

from console.words import elapsed, local, zone_of
from kernel.clock import instant

register = template.Library()


@register.filter
def at(instant, zone_name="UTC"):
    """`<time>` holding the wall-clock instant and the zone's abbreviation; its title gives
    the zone's name and the instant in UTC."""
    if instant is None:
        return "-"
    shown, abbreviation = local(instant, zone_name or "UTC")
    utc = instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return format_html('<time class="instant" datetime="{}" title="{} in {}; {}">{} {}</time>',
                       utc, shown, zone_name, utc, shown, abbreviation)


@register.filter
def iso(value):
    """The API's text of an instant (what a form posts back)."""
    return instant(value) or ""


@register.filter
def after(later, earlier):
    """`+2.0 s`: how long after `earlier` `later` came; `-` when either is missing."""
    if later is None or earlier is None:
        return "-"
    seconds = (later - earlier).total_seconds()
    return f"{'-' if seconds < 0 else '+'}{elapsed(abs(seconds))}"


@register.filter
def took(finished, started):
    """`3.0 s`: from `started` to `finished`; `-` when either is missing."""
    if finished is None or started is None:
        return "-"
    return elapsed(max(0.0, (finished - started).total_seconds()))


@register.filter
def zone(recurrence):
    """The zone a schedule's instants are shown in, from its rule."""
    return zone_of(recurrence)


@register.filter
def ago(earlier, now):
    """`3 min 4 s ago`: from `earlier` to `now`."""
    if earlier is None or now is None:
        return "-"
    return f"{elapsed(max(0.0, (now - earlier).total_seconds()))} ago"
