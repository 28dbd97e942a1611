"""LangChain's own behavioural tests, run against tiermem's classes."""
