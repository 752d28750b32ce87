"""Allocators under test: parsed from their names (allocators: the one registry, the one
injection path, LD_PRELOAD or a link-time driver, and the proof from /proc/PID/maps), and their
own memory account (account), and the one environment policy for every process alloclab starts
(environment: no stray preload or tuning, the catalog's tuning prefixes).
"""
