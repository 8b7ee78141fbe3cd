"""LangChain's own HumanInTheLoopMiddleware tests, run against SignoffMiddleware."""
