"""What drives a workload: alloclab's own driver (driver: its one command-line builder), the real
sysbench (sysbench) and HammerDB (hammerdb).
"""
