"""Tests of the LangChain / LangGraph integration (offline, real langchain and langgraph)."""
