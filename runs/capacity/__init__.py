"""Capacity: runtime statistics, live slots, the demand of the schedules' rules, the wave
simulation and the forecast built from them, and the admission of strict start promises.
Reads only: nothing here changes an occurrence."""
