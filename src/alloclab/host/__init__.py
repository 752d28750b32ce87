"""This machine: processes alloclab starts and kills (processes), CPU sets and memory limits
(placement), /proc sampling (sampler), what else kept the machine busy (noise), the machine's
description and the one list of keys that make two machines comparable (machine), files vendored
beside the checkout (vendor).
"""
