"""Example jobs, declared the way a team declares its own (README, "Add your first job")."""
