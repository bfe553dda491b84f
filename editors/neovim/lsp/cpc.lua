-- LSP config for cpc-lsp (Neovim >= 0.12), see editors/neovim/README.md.
--
-- Put this file on 'runtimepath' as lsp/cpc.lua (for example copy it to
-- ~/.config/nvim/lsp/cpc.lua, or prepend the repository's editors/neovim to
-- 'runtimepath'), then in init.lua:
--
--   vim.lsp.config('cpc', { cmd = { '/path/to/repo/.venv/bin/cpc-lsp', '--stdio' } })
--   vim.lsp.enable('cpc')
--   vim.lsp.inline_completion.enable()
--
-- Anything given to vim.lsp.config('cpc', {...}) is merged over this table.
-- The values below are the server's defaults (keep them equal to
-- `require('cpc').defaults` in lua/cpc.lua; tests/editors/test_neovim.py checks it).
local options = {
  model = 'default', -- 'default' (Gemma 3 270M), 'smollm2', a path to a GGUF file, 'http://HOST:PORT' (a model server), or several replicas' addresses separated by spaces
  remoteVocab = 'default', -- with a server as model: a local GGUF of the served model (vocabulary only)
  remoteTopK = 512, -- with a server: next tokens asked per state
  remoteTimeoutMs = 10000, -- with a server: how long one request may take
  remoteApi = 'auto', -- with a server: 'llama-server' | 'openai' (vLLM, SGLang) | 'auto'
  remoteCaFile = '', -- with an https:// server: a PEM file of the CA that signed its certificate (besides the system's)
  gpuLayers = 0, -- layers to offload to the GPU (0: CPU only)
  threads = 0, -- CPU threads for the model (0: the server decides)
  mode = 'cpc', -- 'cpc' | 'heal' | 'naive'
  multiline = false, -- allow suggestions that span several lines
  maxTokens = 48, -- most tokens generated per suggestion
  items = 1, -- suggestions per request (cycle with vim.lsp.inline_completion.select())
  debounceMs = 30, -- server-side debounce, on top of Neovim's own 200 ms
  promptBudgetMs = 200, -- far into a long file not read yet, the text near the cursor first, then the whole window (0: off)
  wordBudgetMs = 100, -- after this long, show the first word at once; the ghost text grows to the line (0: off)
  warmCache = true, -- while idle, read the text at the last edit into the model's cache, and prepare the next line
  fusion = true, -- workspace fusion: the open buffers and the project's files score each token
  fusionWeight = 1, -- scales both fusion weights (0: fusion changes nothing)
  workspaceIndexing = true, -- read the workspace folder's files (git's ignores respected) for fusion
}

---@type vim.lsp.Config
return {
  -- `cpc-lsp` must be executable (on $PATH); otherwise Neovim refuses to start
  -- the client. Override `cmd` with the absolute path of the venv's cpc-lsp.
  cmd = { 'cpc-lsp', '--stdio' },
  -- No `filetypes`: the server completes any text, so it attaches to every
  -- buffer that has a filetype and is a real file.
  root_markers = { '.git' },
  -- One server (one loaded model) for every buffer, whatever its project.
  reuse_client = function(client, config)
    return client.name == config.name and not client:is_stopped()
  end,
  -- Sent once, in the `initialize` request. No `settings` here on purpose:
  -- Neovim sends workspace/didChangeConfiguration right after `initialized`
  -- whenever `settings` is non-empty. Change settings of a running server with
  -- require('cpc').update({...}) (lua/cpc.lua), which sends
  -- workspace/didChangeConfiguration { settings = { cpc = {...} } }.
  init_options = options,
  -- The server's notifications: `cpc/status` (the model's state) and
  -- `cpc/suggestionReady` (a suggestion grew: ask again), from lua/cpc.lua when
  -- it is on 'runtimepath' too; only then does the client say it asks again
  -- (without it, the server sends each suggestion whole).
  handlers = (function()
    local ok, cpc = pcall(require, 'cpc')
    return ok and cpc.handlers or nil
  end)(),
  capabilities = (function()
    local ok, cpc = pcall(require, 'cpc')
    return ok and cpc.capabilities() or nil
  end)(),
}
