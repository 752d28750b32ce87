"""Every name alloclab knows, and nothing that runs: engines, workloads, clients, sysbench's
tests and TPC-C's modes (names), server targets and their settings profiles (targets), the
studies' TideSQL builds (tidesql), the allocators Debian ships (allocators).
"""
