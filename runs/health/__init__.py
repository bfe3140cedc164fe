"""Schedule health: incidents opened and resolved on database time (evaluation), for the
expectations a schedule carries. Alerts about them are effect intents (effects.alerts)."""
