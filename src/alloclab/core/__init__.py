"""The lowest layer: what every other layer may use and that depends on nothing of alloclab.

    errors       AlloclabError: a message and what to do next (only entry points exit)
    units        durations, sizes, rates and latencies, read and written as people do
    events       the driver's versioned JSON-lines events, read
    gate         the words of the turn protocol (the driver's gate.rs)
    cache        where alloclab keeps what it builds once per machine (~/.cache/alloclab), cargo's too
"""
