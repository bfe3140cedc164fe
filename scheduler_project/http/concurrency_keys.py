"""Concurrency keys (tenant token): the limits on attempts of a key running at once."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from kernel.errors import InvalidRequest
from schedule_services.concurrency_keys import concurrency_key, concurrency_keys, key_limit_delete, key_limit_set
from scheduler_project.http.json import json_object_body
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import StrictIntegerField, StrictSerializer, validate_body
from scheduler_project.http.views import TenantAPIView
from schedules.models import CONCURRENCY_KEY, MAX_CONCURRENCY_KEY_LENGTH, MAX_CONCURRENCY_LIMIT

TAGS = ["concurrency keys"]
KEY_PARAMETER = OpenApiParameter("key", str, OpenApiParameter.PATH,
                                 description="Letters, digits and . _ : -, at most 100")


class ConcurrencyLimitSerializer(StrictSerializer):
    limit = StrictIntegerField(min_value=1, max_value=MAX_CONCURRENCY_LIMIT, help_text="Attempts of the key running at once")


class ConcurrencyKeySerializer(serializers.Serializer):
    key = serializers.CharField()
    limit = serializers.IntegerField(help_text="Attempts of the key that may run at once (1 unless set)")
    limitSet = serializers.BooleanField(help_text="false: no limit was set; the default 1 applies")
    running = serializers.IntegerField(help_text="Attempts of the key running now")
    schedules = serializers.IntegerField(help_text="Live schedules with this key")


class ConcurrencyKeyListSerializer(serializers.Serializer):
    results = ConcurrencyKeySerializer(many=True)


def _key(raw: str) -> str:
    """The path's key, held to the schedule field's rules."""
    if len(raw) > MAX_CONCURRENCY_KEY_LENGTH or not CONCURRENCY_KEY.regex.fullmatch(raw):
        raise InvalidRequest(f"key: {CONCURRENCY_KEY.message}, at most {MAX_CONCURRENCY_KEY_LENGTH}", field="key")
    return raw


class ConcurrencyKeyListView(TenantAPIView):
    @extend_schema(
        operation_id="concurrency_keys_list",
        summary="List concurrency keys",
        description="Every key the tenant set a limit for or one of its live schedules uses, by key.",
        tags=TAGS,
        responses={200: ConcurrencyKeyListSerializer, **error_responses(401, 403)},
    )
    def get(self, request):
        return Response({"results": concurrency_keys(tenant=request.tenant)})


class ConcurrencyKeyView(TenantAPIView):
    @extend_schema(
        operation_id="concurrency_keys_retrieve", summary="Get a concurrency key", parameters=[KEY_PARAMETER],
        description="Its limit, its attempts running now and its live schedules. 404 when no live schedule "
                    "uses it and no limit is set.",
        tags=TAGS, responses={200: ConcurrencyKeySerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, key):
        return Response(concurrency_key(tenant=request.tenant, key=_key(key)))

    @extend_schema(
        operation_id="concurrency_keys_update", summary="Set a concurrency key's limit", parameters=[KEY_PARAMETER],
        description="At most `limit` attempts of the tenant's schedules with this `concurrencyKey` run at once, "
                    "checked by the claim; the others wait `queued` with `pendingReason: concurrency_key`. "
                    "A key without a limit allows 1.",
        tags=TAGS, request=ConcurrencyLimitSerializer,
        responses={200: ConcurrencyKeySerializer, **error_responses(400, 401, 403, 429)},
    )
    def put(self, request, key):
        key = _key(key)
        limit = validate_body(ConcurrencyLimitSerializer, json_object_body(request))["limit"]
        return Response(key_limit_set(tenant=request.tenant, key=key, limit=limit))

    @extend_schema(
        operation_id="concurrency_keys_destroy", summary="Remove a concurrency key's limit",
        parameters=[KEY_PARAMETER], description="The key allows 1 attempt at a time again. 404 without a limit.",
        tags=TAGS, request=None, responses={204: None, **error_responses(400, 401, 403, 404)},
    )
    def delete(self, request, key):
        key_limit_delete(tenant=request.tenant, key=_key(key))
        return Response(status=204)
