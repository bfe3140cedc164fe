"""Operator views of effect intents and every provider request made for them. Read-only;
the actions record an operator's decision through effects.delivery, never a model form."""

from django.contrib import admin

from effects.delivery import effect_resolve
from runs.models import EffectDelivery, EffectIntent
from scheduler_project.admin.schedules import ReadOnlyAdmin, apply_to_each


class EffectDeliveryInline(admin.TabularInline):
    model = EffectDelivery
    extra = 0
    can_delete = False
    fields = ("number", "started_at", "finished_at", "outcome", "external_id", "detail", "request")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(EffectIntent)
class EffectIntentAdmin(ReadOnlyAdmin):
    list_display = ("action", "kind", "state", "run", "delivery_count", "next_attempt_at", "updated_at")
    list_filter = ("kind", "state")
    search_fields = ("action", "run__id", "external_id")
    readonly_fields = ("resolution",)
    inlines = [EffectDeliveryInline]
    actions = ["resolve_sent", "resolve_failed", "resolve_retry"]

    def _resolve(self, request, queryset, resolution, verb):
        actor = f"admin:{request.user.get_username()}"
        apply_to_each(
            self, request, queryset,
            lambda intent: effect_resolve(action=intent.action, resolution=resolution, actor=actor), verb,
        )

    @admin.action(description="Mark as sent (the provider has it)")
    def resolve_sent(self, request, queryset):
        self._resolve(request, queryset, "sent", "Marked sent:")

    @admin.action(description="Mark as failed (give up)")
    def resolve_failed(self, request, queryset):
        self._resolve(request, queryset, "failed", "Marked failed:")

    @admin.action(description="Deliver again under the same identity")
    def resolve_retry(self, request, queryset):
        self._resolve(request, queryset, "retry", "Queued again:")
