"""Answers: reading what a model answered (views), and making answers nobody recorded (the
builder, the in-process model), each asking the provider dialects."""

__all__: list[str] = []
