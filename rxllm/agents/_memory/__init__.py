"""Memory (ADK's ``memory/``): the memory services and the tools that search them."""
