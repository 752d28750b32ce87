"""Allocators under test: parsed from their names (allocators: the one registry, the one
injection path, LD_PRELOAD or a link-time driver, and the proof from /proc/PID/maps), and their
own memory account (account).
"""
