"""Doors onto Memory for other programs: the `heapmem` command (cli, with
sqlguard for its read-only SQL), the MCP server (mcp_server), the LangGraph
store (langgraph_store), LlamaIndex's memory block and retriever (llamaindex),
LangChain's retriever and tools (langchain), the OpenAI Agents SDK's function
tools (openai_agents) and the Datasette plugin (datasette_plugin).  Each
uses only Memory's public methods and the values it returns."""
