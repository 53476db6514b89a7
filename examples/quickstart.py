"""Quickstart: placeholder until the toolkit and runtime land."""

import toolfold

print(toolfold.Message.user("hello"))
