"""From a validated request to a translation: the service, the flow of a text and its parts."""
