"""The Transport seam: the request and response types, headers, errors, cancellation, and
what a body is. Every other part of the package sits on it."""

__all__: list[str] = []
