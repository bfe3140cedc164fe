"""Operator views of effect intents and every provider request made for them (read-only)."""

from django.contrib import admin

from effects.models import EffectDelivery, EffectIntent
from schedules.admin import ReadOnlyAdmin


class EffectDeliveryInline(admin.TabularInline):
    model = EffectDelivery
    extra = 0
    can_delete = False
    fields = ("number", "started_at", "finished_at", "outcome", "external_id", "detail")
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
    inlines = [EffectDeliveryInline]
