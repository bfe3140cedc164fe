"""Jobs: the framework (framework.py) and the built-in jobs (builtin.py)."""
