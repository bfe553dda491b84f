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
-- Anything given to vim.lsp.config('cpc', {...}) is merged over this table:
-- the server's settings go in `init_options`, only those you change (for
-- example `init_options = { maxTokens = 32 }`); the server applies its
-- defaults to the rest (every setting, its type and default:
-- lua/cpc/settings.lua, generated from the server's lsp_server/schema.py).

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
  -- No `init_options` (sent once, in the `initialize` request): the server's
  -- defaults apply until you give some. No `settings` either, on purpose:
  -- Neovim sends workspace/didChangeConfiguration right after `initialized`
  -- whenever `settings` is non-empty. Change settings of a running server with
  -- require('cpc').update({...}) (lua/cpc.lua), which sends
  -- workspace/didChangeConfiguration { settings = { cpc = {...} } }.
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
