"""Adapters that put signoff in front of agent frameworks and protocols (MCP, LangChain, …)."""
