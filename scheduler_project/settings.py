"""Settings: 12-factor, every knob is an environment variable documented in README.md.

With nothing set, the project runs embedded: SQLite under var/, file object store,
database-backed dispatch and no broker.
"""

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from kernel.connections import configure_postgresql
from kernel.database_url import parse_database_url


BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SCHEDULER_VAR_DIR", BASE_DIR / "var"))


def env_bool(name, default=False):
    value = (os.environ.get(name) or "").strip().lower()
    if not value:  # unset or empty
        return default
    return value in {"1", "true", "yes", "on"}


def env_int(name, default):
    return int(os.environ.get(name) or default)  # empty is unset, as compose's ${VAR:-} passes it


def env_float(name, default):
    return float(os.environ.get(name) or default)


def env_sizes(name, default=""):
    """``short=16,long=1`` as ``{"short": 16, "long": 1}``."""
    return {key.strip(): int(value) for key, value in (item.split("=") for item in env_list(name, default))}


def env_list(name, default=""):
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
# Absolute base of every link the scheduler hands out (result URLs, emails, webhooks); links
# never use a request's Host header. When it is set, only its host is served by default.
PUBLIC_BASE_URL = os.environ.get("PUBLIC_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
if "PUBLIC_BASE_URL" in os.environ:
    _public_host = urlsplit(PUBLIC_BASE_URL).hostname or ""
    _default_hosts = f"[{_public_host}]" if ":" in _public_host else _public_host
else:
    _default_hosts = "*"  # development: nothing builds a link from the Host header anyway
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", _default_hosts)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    # The admin's registrations (scheduler_project/admin/) are read where its URLs are
    # (scheduler_project/urls.py calls autodiscover): a worker or scanner never imports them.
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "workers",  # before staticfiles: its runserver (workers/management/commands/runserver.py) wins
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc as our own static files: the docs work offline
    "django_celery_beat",
    "axes",  # failed logins to /admin/ and /console/, counted per user name and per address
    "schedules",
    "runs",
    "effects",
    "console",  # the operations console (/console/), staff only
    # The interface on top of every app: its admin (scheduler_project/admin/), the commands
    # that set a deployment up (create_tenant, bootstrap_demo, import_beat), its static files.
    "scheduler_project",
]
# The example jobs (examples/jobs.py, README "Add your first job"), when the tree has them.
if (BASE_DIR / "examples" / "jobs.py").exists():
    INSTALLED_APPS.append("examples")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "scheduler_project.http.errors.DatabaseUnavailableMiddleware",
    # Last, as django-axes asks: turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "scheduler_project.urls"
WSGI_APPLICATION = "scheduler_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "scheduler_project" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

# --- Database -------------------------------------------------------------------------
EMBEDDED_DATABASE_PATH = VAR_DIR / "scheduler.sqlite3"
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{EMBEDDED_DATABASE_PATH}"
# Several hosts (postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write) for failover.
DATABASES = {"default": parse_database_url(DATABASE_URL, conn_max_age=60)}
# "pgbouncer": DATABASE_URL names a PgBouncer in transaction pooling mode (docs/operations.md).
DATABASE_POOLER = os.environ.get("DATABASE_POOLER", "").strip().lower()
# The web process's threads share a pool of at most this many connections (scheduler_project/
# wsgi.py); a request that waits longer than the timeout for one is answered 503.
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 4)
DATABASE_POOL_TIMEOUT_SECONDS = float(os.environ.get("DATABASE_POOL_TIMEOUT_SECONDS", 5))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Embedded mode: WAL so readers never block the writer, IMMEDIATE so every
    # transaction takes the write lock up front (no upgrade deadlocks), and a busy
    # timeout so concurrent scanner/worker threads wait instead of failing.
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
    }
    # Tests on SQLite get a file beside it, as the embedded processes have, not Django's shared
    # in-memory database: its table locks fail a second thread at once, whatever the timeout.
    DATABASES["default"]["TEST"] = {"NAME": str(Path(DATABASES["default"]["NAME"]).with_suffix(".test.sqlite3"))}
else:
    configure_postgresql(
        DATABASES["default"],
        pooler=DATABASE_POOLER,
        idle_in_transaction_seconds=env_int("DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", 10),
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
EMBEDDED_DATABASE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"

# --- Signing key --------------------------------------------------------------------------
# Signs result links and cursors: with a known key anyone could mint download tokens. With
# DEBUG off, web, workers and loops refuse to start without one (kernel.startup).
# The embedded `make run` (manage.py serve) generates one into var/ once; every process of
# that embedded installation reads it from there.
EMBEDDED_SECRET_KEY_FILE = VAR_DIR / "secret-key"
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY and EMBEDDED_DATABASE and EMBEDDED_SECRET_KEY_FILE.exists():
    SECRET_KEY = EMBEDDED_SECRET_KEY_FILE.read_text().strip()
if not SECRET_KEY and DEBUG:
    SECRET_KEY = "dev-only-insecure-secret-key"

# --- HTTPS (production behind a TLS-terminating proxy: docs/operations.md, "Production settings") --
# Off by default: `make run` and the tests serve plain HTTP on the loopback.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Prometheus scrapes each web container directly, over the internal network.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# The cookies of the admin and console logins follow the redirect unless set on their own.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", SECURE_SSL_REDIRECT)
# The request header a trusted proxy sets to "https" (e.g. X-Forwarded-Proto); only with a
# proxy that overwrites it, or any client could claim HTTPS.
_proxy_ssl_header = os.environ.get("SECURE_PROXY_SSL_HEADER", "").strip().upper().replace("-", "_")
SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header, "https") if _proxy_ssl_header else None

# --- Logins (django-axes) ---------------------------------------------------------------
# Failed logins to /admin/ and /console/ are counted in the database, per user name and per
# client address; at the limit either one is refused (429, even with the right password)
# until the cool-off has passed without another failure. A success clears the count. API
# tokens never pass through these backends.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("LOGIN_COOLOFF_MINUTES", 15))
if AXES_FAILURE_LIMIT < 1 or AXES_COOLOFF_TIME <= timedelta(0):
    raise ValueError("LOGIN_FAILURE_LIMIT must be at least 1 and LOGIN_COOLOFF_MINUTES above 0")
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "scheduler_project.http.login_lockout.login_locked_out"
# Behind a proxy every login comes from the proxy's address: with this set, the address
# counted is the one the proxy appended to X-Forwarded-For (its right-most entry; what a
# client wrote there itself stays to the left). Only when a proxy always appends it.
if env_bool("TRUST_X_FORWARDED_FOR", False):
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    AXES_IPWARE_PROXY_ORDER = "right-most"

# --- Time -------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# The project's own files (scheduler/favicon.svg) are its app's, in scheduler_project/static.
STATIC_ROOT = VAR_DIR / "static"

# --- Dispatch ---------------------------------------------------------------------------
# Unset: no broker; the database-backed dispatcher polls the outbox/run tables.
REDIS_URL = os.environ.get("REDIS_URL", "")
RESOURCE_CLASSES = ("short", "long", "memory")
MAX_LEASE_SECONDS = 3600
# Hard timeouts (workers/timeouts.py): a job still running at its job type's timeout is
# interrupted (an exception raised in it), and its process is ended this much later if it
# has not returned; the attempt's lease never outlasts the timeout by more than the lease
# grace (on database time), after which the sweeper records the timeout itself.
JOB_HARD_TIMEOUT_GRACE_SECONDS = env_float("JOB_HARD_TIMEOUT_GRACE_SECONDS", 2.0)
JOB_TIMEOUT_LEASE_GRACE_SECONDS = env_float("JOB_TIMEOUT_LEASE_GRACE_SECONDS", 5.0)
# The most runs one hint may claim at once, per resource class (unnamed classes: 1). A worker
# process executes a claimed batch one run after another and publishes the results in one
# group commit, so batches suit classes of sub-second jobs; each process also shrinks its
# batch while its jobs take long (workers/batching.py).
CLAIM_BATCH = env_sizes("CLAIM_BATCH", "short=32")

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# A queue message is only a hint; these make hints at-least-once.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Longer than the longest lease, so Redis never redelivers a hint that is still running.
# The interval_* options: a producer (the relay) retries a lost broker after 0.1 s, 0.3 s, ...
# at most 1 s apart, not kombu's 2 s, 4 s, ... 30 s.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": MAX_LEASE_SECONDS * 2,
                                   "interval_start": 0.1, "interval_step": 0.2, "interval_max": 1.0}
CELERY_TASK_DEFAULT_QUEUE = "housekeeping"
# Reconnects to a restarted broker after 0.1 s, not Celery's 2 s, 4 s, ... (workers/consumer.py).
CELERY_WORKER_CONSUMER = "workers.consumer:Consumer"
# A published hint whose run is still queued after this long is assumed lost and republished.
RELAY_REPUBLISH_AFTER_SECONDS = env_int("RELAY_REPUBLISH_AFTER_SECONDS", 30)
# A Celery worker whose queues gave it nothing for this long lets its free processes claim
# queued runs of its resource classes from the database (workers/idle_claims.py): hints lost
# with a broker restart, or the broker away, cost about this long. 0 turns it off.
IDLE_CLAIM_SECONDS = env_float("IDLE_CLAIM_SECONDS", 1.0)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"

# --- Object store -----------------------------------------------------------------------
OBJECT_STORE_URL = os.environ.get("OBJECT_STORE_URL", f"file://{VAR_DIR / 'objects'}")
S3_ENDPOINT_URL = os.environ.get("S3_ENDPOINT_URL") or None
# Where clients outside the deployment reach the same store; presigned result URLs name it.
S3_PUBLIC_ENDPOINT_URL = os.environ.get("S3_PUBLIC_ENDPOINT_URL") or None
S3_REGION = os.environ.get("S3_REGION", "us-east-1")
RESULT_URL_TTL_SECONDS = env_int("RESULT_URL_TTL_SECONDS", 300)
# The largest result a job may produce, whichever way it reaches the store (a worker's HTTP
# upload, a job's bytes, file or streamed output): larger is refused, the run fails.
RESULT_MAX_BYTES = env_int("RESULT_MAX_BYTES", 64 * 1024 * 1024)

# --- Email effects ----------------------------------------------------------------------
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", 25)
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
    EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
else:
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    EMAIL_FILE_PATH = VAR_DIR / "mail"
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "scheduler@localhost")
# Effect adapter (`manage.py effects`): per-operation network timeout for SMTP and webhooks;
# a delivery still unfinished EFFECT_INFLIGHT_SECONDS after it started is taken as uncertain.
EFFECT_TIMEOUT_SECONDS = float(os.environ.get("EFFECT_TIMEOUT_SECONDS", 10))
EFFECT_INFLIGHT_SECONDS = env_int("EFFECT_INFLIGHT_SECONDS", 120)
EFFECT_MAX_DELIVERIES = env_int("EFFECT_MAX_DELIVERIES", 5)
EFFECT_BACKOFF_SECONDS = float(os.environ.get("EFFECT_BACKOFF_SECONDS", 30))
EFFECT_BACKOFF_MAX_SECONDS = float(os.environ.get("EFFECT_BACKOFF_MAX_SECONDS", 3600))
EFFECT_BATCH_SIZE = env_int("EFFECT_BATCH_SIZE", 20)
# Results up to this size are attached to the email; larger ones (or attach: false) are linked.
EFFECT_ATTACH_MAX_BYTES = env_int("EFFECT_ATTACH_MAX_BYTES", 5 * 1024 * 1024)
# Emailed / posted result links stay valid (and pin the object against cleanup) this long.
EFFECT_LINK_TTL_SECONDS = env_int("EFFECT_LINK_TTL_SECONDS", 3 * 86400)
EFFECT_MESSAGE_ID_DOMAIN = os.environ.get("EFFECT_MESSAGE_ID_DOMAIN", "scheduler.invalid")
# Webhooks reach public addresses only; these CIDRs or host names open internal receivers.
WEBHOOK_ALLOWED_NETWORKS = env_list("WEBHOOK_ALLOWED_NETWORKS")

# --- Schedule health (`manage.py health`, runs.health, effects.alerts) -------------------
# One evaluation pass this often; an incident opens at most this long after its breach.
HEALTH_INTERVAL_SECONDS = float(os.environ.get("HEALTH_INTERVAL_SECONDS", 15))
# A failure streak is looked at when one of its failures finished this recently.
HEALTH_LOOKBACK_SECONDS = env_int("HEALTH_LOOKBACK_SECONDS", 3600)
# A forecast incident is opened this far ahead of the instant predicted late (at least 5 minutes).
HEALTH_FORECAST_AHEAD_SECONDS = env_int("HEALTH_FORECAST_AHEAD_SECONDS", 600)
# Each health process simulates the forecast at most this often (it costs more than the rest
# of a pass). An instant stays in the forecast's window (5 minutes to
# HEALTH_FORECAST_AHEAD_SECONDS ahead) longer than this, so it is forecast before it is 5 minutes away.
HEALTH_FORECAST_INTERVAL_SECONDS = env_int("HEALTH_FORECAST_INTERVAL_SECONDS", 60)
# Alerts: at most one message per target in this many seconds, listing every incident since.
HEALTH_DIGEST_SECONDS = env_int("HEALTH_DIGEST_SECONDS", 60)
# An alert whose delivery may have reached its target: hold (an operator decides, as for a
# job type's effects) or retry (deliver again under the same Message-ID / Idempotency-Key).
HEALTH_ALERT_UNCERTAIN_POLICY = os.environ.get("HEALTH_ALERT_UNCERTAIN_POLICY", "hold")

# --- Retention --------------------------------------------------------------------------
RUN_RETENTION_DAYS = env_int("RUN_RETENTION_DAYS", 30)
OBJECT_RETENTION_DAYS = env_int("OBJECT_RETENTION_DAYS", 7)
# A staged upload whose attempt can no longer publish is collected this long after staging.
ORPHAN_GRACE_SECONDS = env_int("ORPHAN_GRACE_SECONDS", 3600)
# Idempotency keys are promised for at least 24 hours (API.md).
REQUEST_KEY_RETENTION_HOURS = env_int("REQUEST_KEY_RETENTION_HOURS", 48)
CLEANUP_BATCH_SIZE = env_int("CLEANUP_BATCH_SIZE", 1000)
# A cleanup pass starts no batch after this long (the loop's passes are a minute apart).
CLEANUP_PASS_SECONDS = float(os.environ.get("CLEANUP_PASS_SECONDS", 45))
# Cleanup waits while this many runs or more are queued and due (a wave being claimed); 0: never.
CLEANUP_YIELD_BACKLOG = env_int("CLEANUP_YIELD_BACKLOG", 1000)

# --- Scheduling -------------------------------------------------------------------------
# Part of the schema (check constraint schedule_bucket_in_range): changing it takes a
# migration that re-buckets every schedule (schedule_services.lifecycle.due_bucket).
DUE_BUCKETS = 64
SCAN_BATCH_SIZE = env_int("SCAN_BATCH_SIZE", 1000)
# Scanner directory (runs.scan_directory): a scanner's lease on its due buckets, renewed
# every fifth of it; a scanner that stops renewing loses them to the others.
SCAN_LEASE_SECONDS = env_int("SCAN_LEASE_SECONDS", 5)
# Timer horizon (runs.timers): due instants this far ahead are held in memory and fired at
# their instant; reloaded from the due index this often; at most this many held.
SCAN_TIMER_HORIZON_SECONDS = env_int("SCAN_TIMER_HORIZON_SECONDS", 60)
SCAN_TIMER_REFRESH_SECONDS = env_int("SCAN_TIMER_REFRESH_SECONDS", 10)
SCAN_TIMER_CAP = env_int("SCAN_TIMER_CAP", 200_000)
# Timers due within this many seconds are armed at each reload: their rows and payloads read
# ahead, so firing is one guarded statement per batch (runs.authority.armed_timers); 0 disables.
SCAN_TIMER_ARM_SECONDS = env_int("SCAN_TIMER_ARM_SECONDS", 20)
# Connections that fire an armed wave's batches at once (threads of the scanner).
SCAN_FIRE_CONNECTIONS = env_int("SCAN_FIRE_CONNECTIONS", 2)
# "builtin", or "shadow:<candidate>": the builtin engine stays authoritative and the
# candidate's next instants are compared at every materialization (schedules.recurrence.shadow_candidates).
RECURRENCE_ENGINE = os.environ.get("RECURRENCE_ENGINE", "builtin")
# Modules holding @scheduler_job declarations beyond the installed apps' `jobs` modules.
SCHEDULER_JOB_MODULES = env_list("SCHEDULER_JOB_MODULES")

# Occurrence rows (runs and skipped records) one materializing transaction writes at most:
# a long outage's catch-up spreads over transactions that stay far below the idle timeout.
SCAN_ROWS_PER_TRANSACTION = env_int("SCAN_ROWS_PER_TRANSACTION", 20000)
# --- Capacity (runs/capacity) -------------------------------------------------------------
# The start objective of ordinary jobs (design: 99 % start within 10 s of their due instant).
CAPACITY_OBJECTIVE_SECONDS = env_int("CAPACITY_OBJECTIVE_SECONDS", 10)
# Runtime statistics: accepted attempts of the last window, at most this many per job type.
CAPACITY_STATS_WINDOW_SECONDS = env_int("CAPACITY_STATS_WINDOW_SECONDS", 7 * 86400)
CAPACITY_STATS_SAMPLES = env_int("CAPACITY_STATS_SAMPLES", 1000)
# A schedule with at least this many accepted attempts in the window is forecast with its
# own mean duration; one with fewer with its job type's.
CAPACITY_SCHEDULE_MIN_SAMPLES = env_int("CAPACITY_SCHEDULE_MIN_SAMPLES", 10)
# Expected duration of a job type without any accepted attempt in the window.
CAPACITY_DEFAULT_DURATION_SECONDS = env_int("CAPACITY_DEFAULT_DURATION_SECONDS", 5)
# Forecasts and admissions read the expected durations (per schedule and per job type) from a
# snapshot the cleanup loop measures again when it is this old; one three times older is not
# used (they measure the window themselves, as before any snapshot).
CAPACITY_STATS_REFRESH_SECONDS = env_int("CAPACITY_STATS_REFRESH_SECONDS", 300)
# Worker processes report their slots this often; a report is alive this long.
CAPACITY_REPORT_INTERVAL_SECONDS = env_int("CAPACITY_REPORT_INTERVAL_SECONDS", 10)
CAPACITY_REPORT_TTL_SECONDS = env_int("CAPACITY_REPORT_TTL_SECONDS", 30)
# scheduler_required_slots looks this far ahead; admission checks a strict schedule's waves this far.
CAPACITY_GAUGE_HORIZON_SECONDS = env_int("CAPACITY_GAUGE_HORIZON_SECONDS", 900)
CAPACITY_ADMISSION_HORIZON_SECONDS = env_int("CAPACITY_ADMISSION_HORIZON_SECONDS", 86400)
# A process computes scheduler_required_slots at most this often (0: at every scrape), over
# the horizon plus this interval, so a cached value still sees every wave of the horizon.
CAPACITY_GAUGE_CACHE_SECONDS = env_int("CAPACITY_GAUGE_CACHE_SECONDS", 60)
# The work one forecast (the API's, the console's, manage.py capacity, the gauge) may do:
# instants of the rules walked plus steps of its simulations. A range that needs more is
# refused (the API's 400 names a range that fits): its cost stays bounded whatever the
# schedules ask for. One admission may do CAPACITY_ADMISSION_BUDGET, spread over the
# simulations it needs.
CAPACITY_FORECAST_BUDGET = env_int("CAPACITY_FORECAST_BUDGET", 250_000)
CAPACITY_ADMISSION_BUDGET = env_int("CAPACITY_ADMISSION_BUDGET", 250_000)
# Share of each resource class's live slots that only strict runs (of schedules with
# startDeadlineSeconds) may take: ordinary runs are claimed only while the class's running
# ordinary runs stay below (1 - share) x its live slots. 0 reserves nothing.
STRICT_RESERVED_SHARE = env_float("STRICT_RESERVED_SHARE", 0.0)
if not 0.0 <= STRICT_RESERVED_SHARE < 1.0:
    raise ValueError("STRICT_RESERVED_SHARE must be at least 0 and below 1")

# Failpoints for fault-injection tests; comma-separated names, empty in production.
FAILPOINTS = frozenset(f for f in os.environ.get("SCHEDULER_FAILPOINTS", "").split(",") if f)

# --- API --------------------------------------------------------------------------------
# The start objective the console's Overview judges lateness against (p99 due-to-start).
CONSOLE_START_OBJECTIVE_SECONDS = float(os.environ.get("CONSOLE_START_OBJECTIVE_SECONDS", 10))
# Set: /metrics answers only requests carrying `Authorization: Bearer <METRICS_TOKEN>`.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "scheduler_project.http.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["scheduler_project.http.throttling.TokenRateThrottle"],
}
# Per-token request rate (tenant and worker tokens alike): a burst, refilled at a steady rate.
# 0 requests per second turns the limit off.
API_RATE_LIMIT_PER_SECOND = float(os.environ.get("API_RATE_LIMIT_PER_SECOND", 100))
API_RATE_LIMIT_BURST = env_int("API_RATE_LIMIT_BURST", 200)
# The rate limit's state: shared by every process through Redis when there is one.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
SPECTACULAR_SETTINGS = {
    "TITLE": "Scheduler API",
    "DESCRIPTION": (
        "Durable recurring schedules, one tracked occurrence (run) per due instant, and a fenced worker "
        "protocol. Tenant endpoints take `Authorization: Bearer <tenant token>` (`manage.py create_tenant`), "
        "worker endpoints a worker token (`manage.py create_worker_token`). JSON in and out; every error "
        "is `{\"error\": {\"code\", \"message\", \"details\"}}` with a stable `code`. The contract is "
        "docs/api.md in the repository, the design docs/design.md."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "TAGS": [
        {"name": "schedules", "description": "Recurring rules, their preview, and run-once and history per schedule."},
        {"name": "runs", "description": "One occurrence: its state, cancellation and its result."},
        {"name": "worker", "description": "Claim, heartbeat, upload and complete under a lease and a fence."},
    ],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "scheduler_project.http.api_docs.describe_job_type_params",
    ],
    # One component for the resource classes (a field may take one or a list) and for author kinds.
    "ENUM_NAME_OVERRIDES": {"ResourceClassEnum": "schedules.models.ResourceClass.values",
                            "AuthorKindEnum": "schedules.models.AuthorKind.values"},
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No validator badge: it would send the schema to an outside service.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# --- Metrics ----------------------------------------------------------------------------
# prometheus_client writes its per-process files there from the first metric on; a missing
# directory would kill every process at import, so it is created before any app loads.
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # django-axes says "BEGIN" at every process start; its failures and lockouts are warnings.
        "axes": {"level": "WARNING"},
    },
}
