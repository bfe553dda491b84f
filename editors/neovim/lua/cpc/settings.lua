-- Generated from lsp_server/schema.py by tools/settings_schema.py: do not edit; run `.venv/bin/python tools/settings_schema.py --write`.
--
-- The server's settings: each one's Lua type, the server's default (applied by the server: the
-- plugin sends only what the user set), and its range or the values it may take.
return {
  model = { type = 'string', default = 'default' },
  gpuLayers = { type = 'number', default = 0, minimum = -1 },
  threads = { type = 'number', default = 0, minimum = 0 },
  contextSize = { type = 'number', default = 1536, minimum = 512 },
  remoteVocab = { type = 'string', default = 'default' },
  remoteTopK = { type = 'number', default = 512, minimum = 1 },
  remoteTimeoutMs = { type = 'number', default = 10000, minimum = 1 },
  remoteApi = { type = 'string', default = 'auto', enum = { 'auto', 'llama-server', 'openai' } },
  remoteCaFile = { type = 'string', default = '' },
  mode = { type = 'string', default = 'cpc', enum = { 'naive', 'heal', 'cpc' } },
  multiline = { type = 'boolean', default = false },
  maxTokens = { type = 'number', default = 48, minimum = 1 },
  items = { type = 'number', default = 1, minimum = 1, maximum = 5 },
  debounceMs = { type = 'number', default = 30, minimum = 0 },
  promptBudgetMs = { type = 'number', default = 200, minimum = 0 },
  wordBudgetMs = { type = 'number', default = 100, minimum = 0 },
  warmCache = { type = 'boolean', default = true },
  logDocuments = { type = 'boolean', default = false },
  fusion = { type = 'boolean', default = true },
  fusionWeight = { type = 'number', default = 1.0, minimum = 0 },
  workspaceIndexing = { type = 'boolean', default = true },
  workspaceMaxBytes = { type = 'number', default = 20000000, minimum = 0 },
  workspaceMaxFileBytes = { type = 'number', default = 512000, minimum = 0 },
  workspaceMaxFiles = { type = 'number', default = 5000, minimum = 0 },
}
