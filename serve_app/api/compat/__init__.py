"""Compatibility APIs: other services' protocols (DeepL, LibreTranslate) over the same service."""
