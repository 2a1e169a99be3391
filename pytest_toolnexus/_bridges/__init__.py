"""Bridges: httpx/httpx2, aiohttp and urllib3 clients become callers of the seam, and the live
default transport answers over a real connection. They only translate."""

__all__: list[str] = []
