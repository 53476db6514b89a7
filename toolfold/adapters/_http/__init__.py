"""The HTTP seam: the transport (timeouts, retries, error mapping, keys), SSE and
the clients under it.
"""
