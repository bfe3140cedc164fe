"""The ground floor every package may stand on and none of which imports a package above it:
errors, ids, the authority's clock, failpoints, the database URL and connection budget,
online migration operations, start-up checks, the progress of long commands."""
