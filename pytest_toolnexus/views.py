"""Provider views: what a model answered, in one shape, whichever provider answered.

    from pytest_toolnexus.views import view

    answer = view(cassette.interactions[0])
    assert answer.finish_reason == "tool_calls"
    assert answer.tool_calls[0].name == "get_weather"

The shape and the finish-reason mapping follow ADR 0011.
"""

from ._answers.views import (
    Provider,
    ProviderView,
    ToolCallView,
    Usage,
    ViewError,
    provider_of,
    view,
)

__all__ = ["Provider", "ProviderView", "ToolCallView", "Usage", "ViewError", "provider_of", "view"]
