"""Serving unmodified clients: installing the bridges into httpx, httpx2, aiohttp and urllib3
for as long as a cassette is in use."""

__all__: list[str] = []
