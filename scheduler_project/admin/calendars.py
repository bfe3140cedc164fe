"""The admin's calendars: created, edited, imported (.ics) and deleted through the services
of schedule_services/calendars.py, so each edit is a revision and recomputes its schedules' next run."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import csrf_protect_m
from django.utils.html import format_html_join

from kernel.errors import DomainError
from schedule_services.calendars import calendar_create, calendar_delete, calendar_import, calendar_update
from schedules.calendars import calendar_fields, ics_dates, parse_dates
from schedules.models import AuthorKind, Calendar, ScheduleCalendar

# Form field -> the request body's key.
BODY_KEYS = {"name": "name", "timezone": "timezone", "exclude_dates": "excludeDates",
             "exclude_annual": "excludeAnnual", "exclude_weekdays": "excludeWeekdays"}


def _lines(text: str) -> list[str]:
    return [part.strip() for part in text.replace(",", "\n").splitlines() if part.strip()]


class CalendarForm(forms.ModelForm):
    name = forms.CharField(max_length=200)
    timezone = forms.CharField(initial="UTC", help_text="IANA zone whose local dates are excluded")
    exclude_dates = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}),
                                    help_text="Dates YYYY-MM-DD, one a line (or comma-separated)")
    exclude_annual = forms.CharField(required=False, help_text="Dates MM-DD every year, comma-separated")
    exclude_weekdays = forms.CharField(required=False, help_text="ISO weekdays, comma-separated: 6, 7 = weekends")
    import_ics = forms.FileField(required=False, label="Import .ics",
                                 help_text="Adds the dates of its all-day events (recurring ones for 10 years)")
    expected_revision = forms.IntegerField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = Calendar
        fields = ("tenant",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.editing = not self.instance._state.adding  # a new calendar already has its id
        if self.editing:
            self.fields["tenant"].disabled = True
            self.initial.update(expected_revision=self.instance.revision, exclude_dates="\n".join(self.instance.exclude_dates),
                                exclude_annual=", ".join(self.instance.exclude_annual),
                                exclude_weekdays=", ".join(str(day) for day in self.instance.exclude_weekdays))

    def clean(self):
        values = super().clean()
        try:
            weekdays = [int(day) if day.isdigit() else day for day in _lines(values.get("exclude_weekdays") or "")]
            body = {"name": values.get("name"), "timezone": values.get("timezone") or "UTC",
                    "excludeDates": _lines(values.get("exclude_dates") or ""),
                    "excludeAnnual": _lines(values.get("exclude_annual") or ""), "excludeWeekdays": weekdays}
            self.calendar_values = calendar_fields(body, partial=False)
            upload = values.get("import_ics")
            self.ics_text = upload.read() if upload else None
            if self.ics_text is not None:
                added = {day.isoformat() for day in ics_dates(self.ics_text)}
                parse_dates(sorted(added | set(self.calendar_values["exclude_dates"])), field="excludeDates")
        except DomainError as exc:
            field = {key: name for name, key in BODY_KEYS.items()}.get(exc.details.get("field"))
            raise forms.ValidationError({field: exc.message} if field else exc.message) from None
        if self.editing and values.get("expected_revision") != self.instance.revision:
            raise forms.ValidationError(f"the calendar was edited meanwhile (now revision {self.instance.revision}): "
                                        "reload the page")
        return values

    def save(self, commit=True):
        """The services write the calendar and its revision; an .ics file is imported after."""
        tenant = self.instance.tenant if self.editing else self.cleaned_data["tenant"]
        if self.editing:
            calendar = calendar_update(tenant=tenant, calendar_id=self.instance.pk,
                                       expected_revision=self.instance.revision, fields=self.calendar_values,
                                       author_kind=AuthorKind.ADMIN)
        else:
            calendar = calendar_create(tenant=tenant, fields=self.calendar_values, author_kind=AuthorKind.ADMIN)
        if self.ics_text is not None:
            calendar = calendar_import(tenant=tenant, calendar_id=calendar.pk, text=self.ics_text,
                                       author_kind=AuthorKind.ADMIN)
        self.instance = calendar
        return calendar

    def save_m2m(self):
        pass


@admin.register(Calendar)
class CalendarAdmin(admin.ModelAdmin):
    form = CalendarForm
    list_display = ("name", "id", "tenant", "timezone", "revision", "dates", "updated_at")
    list_filter = ("tenant",)
    search_fields = ("id", "name")
    readonly_fields = ("revision", "used_by")
    actions = ["delete_unused"]

    @csrf_protect_m
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        """Not in one transaction, as the admin's forms usually are: the services' own
        transactions write, and the schedules' recompute runs in batches after the edit."""
        return self._changeform_view(request, object_id, form_url, extra_context)

    def get_fields(self, request, obj=None):
        fields = ["tenant", "name", "timezone", "exclude_dates", "exclude_annual", "exclude_weekdays", "import_ics",
                  "expected_revision"]
        return fields + ["revision", "used_by"] if obj is not None else fields

    def has_delete_permission(self, request, obj=None):
        return False  # deleting goes through the service, which refuses a calendar in use

    def save_model(self, request, obj, form, change):
        """Nothing left to write: the form's service calls wrote the calendar and its revision."""

    def save_form(self, request, form, change):
        return form.save()

    @admin.display(description="excluded dates")
    def dates(self, obj):
        return len(obj.exclude_dates)

    @admin.display(description="schedules using it")
    def used_by(self, obj):
        ids = ScheduleCalendar.objects.filter(calendar=obj, schedule__deleted_at__isnull=True).values_list(
            "schedule_id", flat=True)[:50]
        return format_html_join(", ", "<a href=\"../../../schedule/{}/change/\">{}</a>", ((i, i) for i in ids)) or "-"

    @admin.action(description="Delete the selected calendars no schedule uses")
    def delete_unused(self, request, queryset):
        for calendar in queryset:
            try:
                calendar_delete(tenant=calendar.tenant, calendar_id=calendar.id)
                messages.success(request, f"deleted {calendar.name}")
            except DomainError as exc:
                messages.error(request, f"{calendar.name}: {exc.message}")
