"""Catalog of the built-in job types: their operating policy and versioned parameter schemas.

The code that runs each type lives in workers.jobs; this is the data the scheduler needs
to accept a schedule and to lease, time out and retry its runs.
"""

BUILTIN_JOB_TYPES = {
    "report.sales": {
        "resource_class": "short",
        "params_schema_version": 1,
        "params_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "region": {"type": "string", "enum": ["us", "eu", "apac", "latam"]},
                "date": {"type": "string", "format": "date", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
            },
        },
        "default_lease_seconds": 30,
        "timeout_seconds": 300,
        "max_attempts": 3,
        "uncertain_effect_policy": "hold",
    },
    "demo.sleep": {
        "resource_class": "short",
        "params_schema_version": 1,
        "params_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "seconds": {"type": "number", "minimum": 0, "maximum": 86400},
                "fail": {"type": "string", "enum": ["never", "transient", "permanent"]},
            },
        },
        "default_lease_seconds": 30,
        "timeout_seconds": 3600,
        "max_attempts": 3,
        "uncertain_effect_policy": "retry",
    },
    "demo.export": {
        "resource_class": "long",
        "params_schema_version": 1,
        "params_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 86400}},
        },
        "default_lease_seconds": 60,
        "timeout_seconds": 3600,
        "max_attempts": 2,
        "uncertain_effect_policy": "hold",
    },
}
