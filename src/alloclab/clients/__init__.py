"""What drives a workload: alloclab's own driver (driver: its one command-line builder), the real
sysbench (sysbench) and HammerDB (hammerdb); a server's life (life: the phase sequencer, and
pglife: PostgreSQL's pool of sessions held through it).
"""
