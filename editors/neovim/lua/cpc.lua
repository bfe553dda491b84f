-- cpc-lsp inline completions for Neovim >= 0.12.
--
--   vim.opt.runtimepath:prepend('/path/to/repo/editors/neovim')
--   require('cpc').setup({ cmd = { '/path/to/repo/.venv/bin/cpc-lsp', '--stdio' } })
--
-- See editors/neovim/README.md for every option.
local M = {}

--- The server's settings: each one's type, default and range (lua/cpc/settings.lua,
--- generated from the server's schema, lsp_server/schema.py).
local schema = require('cpc.settings')

--- The server's defaults, for reference: only the settings the user gives are
--- sent (as `initializationOptions` and, on M.update(), as
--- workspace/didChangeConfiguration { settings = { cpc = ... } }); the server
--- applies its defaults to the rest.
M.defaults = {}
for key, setting in pairs(schema) do
  M.defaults[key] = setting.default
end

--- Options of setup() that are about Neovim, not the server.
M.editor_defaults = {
  cmd = { 'cpc-lsp', '--stdio' }, -- absolute path recommended: '/path/to/repo/.venv/bin/cpc-lsp'
  log_file = nil, -- adds `--log-file PATH` to cmd
  filetypes = nil, -- nil: every filetype
  root_markers = { '.git' },
  enable = true, -- call vim.lsp.enable('cpc') and vim.lsp.inline_completion.enable()
  progress = true, -- echo the server's model-loading progress
  keymaps = {
    accept = '<Tab>', -- insert mode: accept the suggestion, else the key itself
    accept_word = '<M-Right>', -- insert mode: accept its next word, else the key itself
    accept_line = '<M-C-Right>', -- insert mode: accept the rest of its line, else the key itself
    next = '<M-n>', -- insert mode: next suggestion (the server brings alternatives when asked)
    prev = '<M-p>', -- insert mode: previous suggestion
  },
  config = {}, -- extra vim.lsp.Config fields (capabilities, on_attach, ...)
}

--- The settings the user gave (after setup()/update()): what the server is sent.
M.settings = {}

local function check_settings(settings)
  for key, value in pairs(settings) do
    local setting = schema[key]
    if not setting then
      error(('cpc: unknown setting %q'):format(key), 3)
    end
    vim.validate(key, value, setting.type)
    if setting.enum and not vim.tbl_contains(setting.enum, value) then
      error(('cpc: %s must be one of %s, not %q'):format(key, table.concat(setting.enum, ', '), value), 3)
    end
    if setting.minimum and value < setting.minimum then
      error(('cpc: %s must be at least %s, not %s'):format(key, setting.minimum, value), 3)
    end
    if setting.maximum and value > setting.maximum then
      error(('cpc: %s must be at most %s, not %s'):format(key, setting.maximum, value), 3)
    end
  end
end

local function has_inline_completion()
  return vim.lsp.config ~= nil and vim.lsp.enable ~= nil and vim.lsp.inline_completion ~= nil
end

--- The rest of a line that only closes brackets and quotes (an editor's auto-closed pairs), perhaps with a colon,
--- semicolon, comma or brace: the server's `cpc.stops.CLOSERS`.
local CLOSERS = '^[%)%]}"\'`]+%s*[:;,{]?$'

--- Whether `closers` are in `text` in their order.
---@param text string
---@param closers string
---@return boolean
local function takes_in(text, closers)
  local at = 1
  for i = 1, #closers do
    local found = text:find(closers:sub(i, i), at, true)
    if not found then
      return false
    end
    at = found + 1
  end
  return true
end

--- Apply an accepted suggestion (a vim.lsp.inline_completion.Item) the way
--- Neovim's default accept does (its `range` replaced by its `insertText`, the
--- cursor put after it), with one difference: characters typed after the
--- request was sent that agree with the suggestion are replaced too. Neovim
--- keeps showing the previous suggestion until the next answer arrives (200 ms
--- debounce + the server's time), and its default accept would keep such
--- characters in front of the suggestion's tail ("self.widt" + "width" ->
--- "self.widtht"). Closers after the cursor that the suggestion takes in
--- (`f(a|)` and `a, b):`) are replaced, typed on or not. Returns false,
--- changing nothing, when the characters typed since disagree with the suggestion.
---@param item vim.lsp.inline_completion.Item
---@param bufnr? integer
---@return boolean applied
function M.apply(item, bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  local text = item.insert_text
  if type(text) ~= 'string' then
    vim.snippet.expand(text.value)
  elseif not item.range then
    vim.api.nvim_paste(text, false, 0)
  else
    local win = vim.fn.bufwinid(bufnr)
    local srow, scol = item.range.start.row, item.range.start.col
    local erow, ecol = item.range.end_.row, item.range.end_.col
    local cursor = vim.api.nvim_win_get_cursor(win)
    local crow, ccol = cursor[1] - 1, cursor[2]
    local line = vim.api.nvim_buf_get_lines(bufnr, erow, erow + 1, false)[1] or ''
    if crow == erow and srow == erow and ccol > ecol then
      if not vim.startswith(text, line:sub(scol + 1, ccol)) then
        return false
      end
      ecol = ccol
    end
    if crow == erow and srow == erow and ccol >= scol then
      -- closers after the cursor that the suggestion holds (the server replaces them: cpc.stops) are replaced
      -- whole, however many characters were typed since the request
      local after = line:sub(ccol + 1):gsub('%s+$', '')
      if after:match(CLOSERS) and takes_in(text:sub(ccol - scol + 1), after) then
        ecol = ccol + #after
      end
    end
    ecol = math.min(ecol, #line) -- characters deleted since the request
    local lines = vim.split(text, '\n', { plain = true })
    vim.api.nvim_buf_set_text(bufnr, srow, scol, erow, ecol, lines)
    vim.api.nvim_win_set_cursor(win, {
      srow + #lines,
      (#lines == 1 and scol or 0) + #lines[#lines],
    })
  end
  if item.command then
    local client = vim.lsp.get_client_by_id(item.client_id)
    if client then
      client:exec_cmd(item.command, { bufnr = bufnr })
    end
  end
  return true
end

--- A word's characters for accept-word: ASCII letters, digits, `_`, and the
--- bytes of any other UTF-8 character.
local WORD = '[%w_\128-\255]'
local NOT_WORD = '[^%s%w_\128-\255]' -- nor a blank

--- What accept-word or accept-line takes of `rest`, the suggestion's text after
--- the characters already in the buffer: for 'word', blanks and then a run of
--- word characters or a run of other characters (`join(path, name)` gives
--- `join`, `(`, `path`, `,`, ` name`, `)`); for 'line', up to its line's end
--- (from a line break: the break and the next line).
---@param rest string
---@param unit 'word'|'line'
---@return string
function M.next_part(rest, unit)
  if unit == 'line' then
    local line_end = rest:find('\n', 2, true)
    return line_end and rest:sub(1, line_end - 1) or rest
  end
  return rest:match('^%s*' .. WORD .. '+') or rest:match('^%s*' .. NOT_WORD .. '+') or rest
end

--- Neovim's inline completion state of a buffer (nil where this Neovim's
--- inline completion has none: the calls on it are not public).
local function completor_of(bufnr)
  local ok, capability = pcall(require, 'vim.lsp._capability')
  local inline = ok and capability.all and capability.all.inline_completion
  return inline and inline.active[bufnr]
end

--- Accept the next word or the rest of the line of a suggestion (M.next_part)
--- at the cursor, and show the rest of it at once: Neovim would show nothing
--- until its next answer (200 ms after the cursor moves), so the item is shown
--- again from where the accepted part ends and the server is asked at once
--- (its suggestion cache answers). The whole rest, and a suggestion that
--- does not start at the cursor's line, are accepted with M.apply. Returns
--- false, changing nothing, when the characters typed since disagree with it.
---@param item vim.lsp.inline_completion.Item
---@param unit 'word'|'line'
---@param bufnr? integer
---@return boolean applied
function M.apply_part(item, unit, bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  local text = item.insert_text
  local win = vim.fn.bufwinid(bufnr)
  local cursor = vim.api.nvim_win_get_cursor(win)
  local row, col = cursor[1] - 1, cursor[2]
  local start = item.range and item.range.start or { row = row, col = col }
  if type(text) ~= 'string' or start.row ~= row or col < start.col then
    return M.apply(item, bufnr)
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  local typed = line:sub(start.col + 1, col)
  if not vim.startswith(text, typed) then
    return false
  end
  local rest = text:sub(#typed + 1)
  local part = M.next_part(rest, unit)
  if part == rest then
    return M.apply(item, bufnr)
  end
  local lines = vim.split(part, '\n', { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  vim.api.nvim_win_set_cursor(win, { row + #lines, (#lines == 1 and col or 0) + #lines[#lines] })
  local completor = completor_of(bufnr)
  if completor and completor.select and completor.request then
    completor:select(item._index or 1)
    completor:request(vim.lsp.protocol.InlineCompletionTriggerKind.Automatic)
  end
  return true
end

--- Show the next (`count` 1) or the previous (-1) suggestion. Where the one
--- shown is the only one held, ask the server again, invoked, as VS Code's
--- Alt+] does: it answers with alternatives, the one shown first, and the one
--- after it (or the last, for -1) is shown once they come. Neovim has no public
--- call for that either: the inline completion's own request is used, and
--- where it is missing this only cycles through what is held.
---@param count integer
function M.cycle(count)
  local completor = completor_of(vim.api.nvim_get_current_buf())
  if not (completor and completor.current and completor.request and completor.count_items)
    or completor:count_items() ~= 1 then
    vim.lsp.inline_completion.select({ count = count })
    return
  end
  local handler = completor.handler
  -- its answer goes through the completor's handler (which shows the first item), once, then this
  completor.handler = function(self, err, result, ctx)
    self.handler = nil
    handler(self, err, result, ctx)
    local n = self:count_items()
    if n > 1 then
      self:select(count % n + 1, true)
    end
  end
  completor:request(vim.lsp.protocol.InlineCompletionTriggerKind.Invoked)
end

--- Accept the shown suggestion (M.apply; with `unit`, its next word or the
--- rest of its line: M.apply_part); when there is none, or it is out of date,
--- feed `fallback` (a key in 'keycodes' notation) instead.
---@param fallback string
---@param unit? 'word'|'line'
---@return function expr mapping
function M.accept_or(fallback, unit)
  return function()
    local shown = vim.lsp.inline_completion.get({
      on_accept = function(item)
        local applied
        if unit then
          applied = M.apply_part(item, unit)
        else
          applied = M.apply(item)
        end
        if not applied then
          vim.api.nvim_feedkeys(vim.keycode(fallback), 'n', false)
        end
      end,
    })
    return shown and '' or fallback
  end
end

local function set_keymaps(keymaps)
  if not keymaps then
    return
  end
  for key, unit in pairs({ accept = false, accept_word = 'word', accept_line = 'line' }) do
    if keymaps[key] then
      vim.keymap.set('i', keymaps[key], M.accept_or(keymaps[key], unit or nil), {
        expr = true,
        replace_keycodes = true,
        desc = 'cpc: accept the inline completion' .. (unit and (' (its next ' .. unit .. ')') or ''),
      })
    end
  end
  if keymaps.next then
    vim.keymap.set('i', keymaps.next, function()
      M.cycle(1)
    end, { desc = 'cpc: next inline completion' })
  end
  if keymaps.prev then
    vim.keymap.set('i', keymaps.prev, function()
      M.cycle(-1)
    end, { desc = 'cpc: previous inline completion' })
  end
end

local progress_autocmd
local function echo_progress()
  if progress_autocmd then
    return
  end
  progress_autocmd = vim.api.nvim_create_autocmd('LspProgress', {
    group = vim.api.nvim_create_augroup('cpc.progress', { clear = true }),
    pattern = { 'begin', 'end' },
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if not client or client.name ~= 'cpc' then
        return
      end
      local value = ev.data.params.value or {}
      local text = value.title or value.message or value.kind
      if value.kind == 'end' then
        text = value.message or 'ready'
      end
      text = tostring(text)
      vim.api.nvim_echo({ { text:match('^cpc') and text or ('cpc: ' .. text) } }, false, {})
    end,
  })
end

--- The last `cpc/status` the server pushed, per client id (it sends one when a
--- model load starts and when it ends: state 'loading', 'ready' or 'error').
M.states = {}

--- One line about a server status (the `cpc/status` object).
---@param status table
---@return string
function M.describe(status)
  local state = status.state or (status.ready and 'ready' or 'starting')
  if state == 'ready' and type(status.serverError) == 'string' then
    return 'cpc: the model server does not serve: ' .. status.serverError
  elseif state == 'ready' then
    local where = type(status.placement) == 'table' and status.placement.text or nil
    local workspace = type(status.workspace) == 'table' and status.workspace or {}
    return ('cpc: ready, model %s%s; %d requests (%d from the model, %d from the cache); %d windows read ahead; '
      .. 'workspace: %s, %d files%s'):format(
      status.model or '?', where and (' on ' .. where) or '', status.requests or 0, status.from_model or 0,
      status.from_cache or 0, status.warmed or 0, workspace.state or '?', workspace.files or 0,
      (workspace.reread or 0) > 0 and (', %d read again since'):format(workspace.reread) or '')
  elseif state == 'loading' then
    return 'cpc: loading the model; suggestions asked for meanwhile come when it is ready'
  elseif state == 'error' then
    return 'cpc: error: ' .. tostring(status.error)
  end
  return 'cpc: ' .. state
end

--- The `cpc/status` notification handler: keeps the state, and warns when the
--- model could not be loaded. Loading and ready are not echoed here: the
--- progress echo says them, and a second message would make Neovim stop the
--- typing at a hit-enter prompt.
local function on_status(_, params, ctx)
  if type(params) ~= 'table' then
    return
  end
  M.states[ctx.client_id] = params
  if params.state == 'error' then
    vim.notify(M.describe(params), vim.log.levels.WARN)
  end
end

--- The `cpc/suggestionReady` notification handler. The server answers a slow
--- request early (its first word) and tells the client when the rest of the
--- line is ready: a notification with the document, its version and the
--- cursor position. If the current buffer is still at that version with the
--- cursor there, in insert mode, ask again at once (the server's suggestion
--- cache answers), so the ghost text grows without another key. Neovim has no
--- public call for that: the inline completion's own request is used, and
--- nothing happens where it is missing.
function M.on_suggestion_ready(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local bufnr = vim.api.nvim_get_current_buf()
  if not client or type(params) ~= 'table' or type(params.position) ~= 'table' then
    return
  end
  if not vim.api.nvim_get_mode().mode:match('^i') or vim.uri_from_bufnr(bufnr) ~= params.uri
    or vim.lsp.util.buf_versions[bufnr] ~= params.version then
    return
  end
  local here = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  if here.line ~= params.position.line or here.character ~= params.position.character then
    return
  end
  local completor = completor_of(bufnr)
  if completor and completor.request then
    completor:request(vim.lsp.protocol.InlineCompletionTriggerKind.Automatic)
  end
end

--- Tells the cpc client of buffer `bufnr` where the cursor came to rest
--- (`cpc/cursorRest`): the server reads the prompt window there while the user
--- looks, so that the first key typed there does not wait for it. Sent when the
--- cursor moves in normal mode and when insert mode is entered; typing moves it
--- with an edit, which says where it is.
---@param bufnr integer
function M.tell_rest(bufnr)
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'cpc' })[1]
  if not client or not client.initialized or bufnr ~= vim.api.nvim_get_current_buf() then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  client:notify('cpc/cursorRest', { textDocument = params.textDocument, position = params.position })
end

--- The client capabilities beyond Neovim's own: the server answers a slow
--- request early only for a client that says it asks again on
--- `cpc/suggestionReady`, which this Neovim can where its inline completion
--- has the request `on_suggestion_ready` uses.
---@return lsp.ClientCapabilities
function M.capabilities()
  local _ = vim.lsp.inline_completion -- loads the module that registers its capability
  local ok, capability = pcall(require, 'vim.lsp._capability')
  local inline = ok and capability.all and capability.all.inline_completion
  return { experimental = { cpc = { suggestionReady = inline ~= nil and inline.request ~= nil } } }
end

--- The server's notifications (lsp/cpc.lua installs the same without setup()).
M.handlers = {
  ['cpc/status'] = on_status,
  ['cpc/suggestionReady'] = M.on_suggestion_ready,
}

--- What :CpcStatus prints: each running cpc client's `cpc/status`, asked now
--- (the last one pushed when the server does not answer in time).
---@return string[] lines
function M.status_lines()
  local clients = vim.lsp.get_clients({ name = 'cpc' })
  if #clients == 0 then
    return { 'cpc: no server running (is the buffer a file, and `cmd` executable? :checkhealth vim.lsp)' }
  end
  local lines = {}
  for _, client in ipairs(clients) do
    local answer = client:request_sync('cpc/status', {}, 2000)
    local status = answer and answer.result or M.states[client.id]
    if status then
      table.insert(lines, M.describe(status))
    else
      table.insert(lines, 'cpc: the server did not answer cpc/status' .. (answer and answer.err and (': ' .. answer.err.message) or ''))
    end
  end
  return lines
end

--- Parse `key=value` words of :CpcSet.
local function parse_assignments(fargs)
  local settings = {}
  for _, word in ipairs(fargs) do
    local key, raw = word:match('^([%w_]+)=(.*)$')
    if not key then
      error(('cpc: expected key=value, got %q'):format(word), 0)
    end
    local value
    local type_ = schema[key] and schema[key].type
    if type_ == 'boolean' then
      value = raw == 'true' or raw == '1' or raw == 'on'
    elseif type_ == 'number' then
      value = tonumber(raw)
      if value == nil then
        error(('cpc: %s must be a number, not %q'):format(key, raw), 0)
      end
    else
      value = raw
    end
    settings[key] = value
  end
  return settings
end

--- :CpcToggle, :CpcSet and :CpcStatus (also created by plugin/cpc.lua).
function M.create_commands()
  vim.api.nvim_create_user_command('CpcStatus', function()
    vim.api.nvim_echo({ { table.concat(M.status_lines(), '\n') } }, true, {})
  end, { desc = "cpc: the server's state (loading, ready, error) and request counts" })
  vim.api.nvim_create_user_command('CpcToggle', function()
    M.toggle()
  end, { desc = 'cpc: toggle inline completions' })
  vim.api.nvim_create_user_command('CpcSet', function(args)
    M.update(parse_assignments(args.fargs))
  end, {
    nargs = '+',
    desc = 'cpc: change settings of the running server, e.g. :CpcSet mode=heal maxTokens=32',
    complete = function()
      local keys = vim.tbl_keys(schema)
      table.sort(keys)
      return vim.tbl_map(function(k)
        return k .. '='
      end, keys)
    end,
  })
end

--- Configure, enable and map cpc-lsp's inline completions.
---
--- Takes the server settings (M.defaults' keys: only those given are sent, the
--- server's defaults apply to the rest) and the editor options
--- (M.editor_defaults' keys) in one flat table.
---@param opts? table
function M.setup(opts)
  opts = opts or {}
  if not has_inline_completion() then
    error('cpc: needs Neovim >= 0.12 (vim.lsp.config, vim.lsp.enable, vim.lsp.inline_completion)')
  end

  local settings = {}
  local editor = vim.deepcopy(M.editor_defaults)
  for key, value in pairs(opts) do
    if schema[key] then
      settings[key] = value
    elseif key == 'keymaps' and type(value) == 'table' then
      -- merged over the default keymaps; set one to false to leave that key alone
      editor.keymaps = vim.tbl_extend('force', M.editor_defaults.keymaps, value)
    elseif M.editor_defaults[key] ~= nil or key == 'log_file' or key == 'filetypes' then
      editor[key] = value
    else
      error(('cpc: unknown option %q'):format(key), 2)
    end
  end
  check_settings(settings)
  M.settings = settings

  local cmd = editor.cmd
  if type(cmd) == 'string' then
    cmd = { cmd, '--stdio' }
  end
  cmd = vim.deepcopy(cmd)
  if editor.log_file then
    vim.list_extend(cmd, { '--log-file', vim.fs.normalize(editor.log_file) })
  end
  if type(cmd[1]) == 'string' and vim.fn.executable(cmd[1]) ~= 1 then
    vim.notify(
      ('cpc: %q is not executable, so Neovim will not start the server; '
        .. "set cmd to the venv's cpc-lsp (e.g. /path/to/repo/.venv/bin/cpc-lsp)"):format(cmd[1]),
      vim.log.levels.WARN
    )
  end

  local config = vim.tbl_extend('force', {
    cmd = cmd,
    filetypes = editor.filetypes,
    root_markers = editor.root_markers,
    -- One server (one loaded model) for every buffer, whatever its project.
    reuse_client = function(client, client_config)
      return client.name == client_config.name and not client:is_stopped()
    end,
    init_options = vim.deepcopy(settings),
    handlers = M.handlers,
    capabilities = M.capabilities(),
  }, editor.config or {})
  vim.lsp.config('cpc', config)

  if editor.enable then
    vim.lsp.enable('cpc')
    vim.lsp.inline_completion.enable()
    vim.api.nvim_create_autocmd({ 'CursorMoved', 'InsertEnter' }, {
      group = vim.api.nvim_create_augroup('cpc_cursor_rest', { clear = true }),
      desc = 'cpc: tell the server where the cursor rests',
      -- scheduled: on InsertEnter the cursor is not yet where `a` or `A` puts it
      callback = function(args)
        vim.schedule(function()
          M.tell_rest(args.buf)
        end)
      end,
    })
  end
  set_keymaps(editor.keymaps)
  if editor.progress then
    echo_progress()
  end
  M.create_commands()
  return M
end

--- Change settings of running cpc clients (workspace/didChangeConfiguration,
--- with every setting the user gave: the client's current ones with `settings` over them)
--- and of clients started later (merged into vim.lsp.config('cpc').init_options).
---@param settings table subset of M.defaults' keys
function M.update(settings)
  check_settings(settings)
  M.settings = vim.tbl_extend('force', M.settings, settings)
  vim.lsp.config('cpc', { init_options = vim.deepcopy(settings) })
  for _, client in ipairs(vim.lsp.get_clients({ name = 'cpc' })) do
    local current = (client.settings or {}).cpc or client.config.init_options or {}
    local merged = vim.tbl_extend('force', vim.deepcopy(current), settings)
    client.settings = vim.tbl_extend('force', client.settings or {}, { cpc = merged })
    client:notify('workspace/didChangeConfiguration', { settings = { cpc = vim.deepcopy(merged) } })
  end
end

--- Turn automatic inline completions on or off (all buffers).
---@param enable? boolean default: the opposite of the current state
function M.toggle(enable)
  if enable == nil then
    enable = not vim.lsp.inline_completion.is_enabled()
  end
  vim.lsp.inline_completion.enable(enable)
  vim.api.nvim_echo({ { 'cpc: inline completions ' .. (enable and 'on' or 'off') } }, false, {})
end

return M
