"""The drivers: the one run loop, the shells that perform its ops, the tool
executor and its worker threads, and output checking. Users import from
`toolfold.runtime`.
"""
