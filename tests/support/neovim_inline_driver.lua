-- Drives a real headless Neovim (>= 0.12) through one inline completion with
-- the repository's editors/neovim setup. Run by tests/editors/test_neovim.py as
--
--   nvim --headless --clean -n -c 'luafile tests/support/neovim_inline_driver.lua'
--
-- Inputs (environment):
--   CPC_TEST_RTP      the repository's editors/neovim (prepended to 'runtimepath')
--   CPC_TEST_CMD      JSON list: the server command
--   CPC_TEST_FILE     the file to edit
--   CPC_TEST_LINE     1-based line whose end the cursor goes to
--   CPC_TEST_COL      optional: the 0-based byte column the keys are typed
--                     before, instead of the line's end
--   CPC_TEST_TYPE     identifier characters typed there, one key at a time
--   CPC_TEST_OUT      where the JSON result goes
--   CPC_TEST_WAIT_MS  how long to wait for a suggestion (default 120000)
--   CPC_TEST_PAUSE    optional: once the suggestion shows, write this file and
--                     wait (30 s at most) for PAUSE.done before accepting, so
--                     that the screen can be captured
--   CPC_TEST_SETTINGS optional JSON object: server settings for setup()
--                     (default: no time budgets)
--   CPC_TEST_GROW_MS  optional: once the suggestion shows, wait this long at
--                     most, with no key, for the ghost text to grow (the
--                     server's cpc/suggestionReady), noting every change
--   CPC_TEST_ACCEPT_WORD optional: before the Tab, accept the suggestion's
--                     next word (the setup's <M-Right>), note the line and
--                     the ghost text at once, then wait for the server's
--                     answer at the new cursor
--   CPC_TEST_NEXT     optional: before the Tab, ask for the next suggestion
--                     (the setup's <M-n>) and wait for the ghost text to change
--
-- After accepting, the buffer is written to CPC_TEST_FILE.
--
-- Everything happens in a coroutine resumed by timers, so Neovim's main loop
-- runs between steps: typed keys are processed as real typing (InsertEnter,
-- CursorMovedI, TextChangedI fire) and LSP messages are handled.
local uv = vim.uv
local api = vim.api

local env = vim.env
local out_path = assert(env.CPC_TEST_OUT, 'CPC_TEST_OUT')
local wait_ms = tonumber(env.CPC_TEST_WAIT_MS or '') or 120000
local t0 = uv.hrtime()

local function now_ms()
  return math.floor((uv.hrtime() - t0) / 1e6)
end

local result = { ok = false, events = {}, steps = {} }
local function event(kind, data)
  table.insert(result.events, { t = now_ms(), kind = kind, data = data })
end
local function step(text)
  table.insert(result.steps, ('%6d ms  %s'):format(now_ms(), text))
end

-- textDocument/inlineCompletion requests in flight, and how many were sent and answered.
local inline = { pending = {}, sent = 0, answered = 0 }

local done = false
local function finish()
  if done then
    return
  end
  done = true
  result.elapsed_ms = now_ms()
  result.mode = api.nvim_get_mode().mode
  local ok_msgs, msgs = pcall(api.nvim_exec2, 'messages', { output = true })
  result.messages = ok_msgs and msgs.output or tostring(msgs)
  result.lsp_log = vim.lsp.log.get_filename()
  result.clients = {}
  for _, c in ipairs(vim.lsp.get_clients()) do
    table.insert(result.clients, {
      id = c.id,
      name = c.name,
      cmd = type(c.config.cmd) == 'table' and c.config.cmd or tostring(c.config.cmd),
      initialized = c.initialized,
      stopped = c:is_stopped(),
      offset_encoding = c.offset_encoding,
      attached_buffers = vim.tbl_keys(c.attached_buffers),
      server_capabilities = c.server_capabilities,
      init_options = c.config.init_options,
    })
  end
  local ok_status, status = pcall(vim.lsp.status)
  result.lsp_status = ok_status and status or nil
  local f = assert(io.open(out_path, 'w'))
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd('qall!')
end

-- Hard stop, whatever happens.
vim.defer_fn(function()
  result.error = result.error or ('driver timed out after %d ms'):format(now_ms())
  finish()
end, wait_ms + 30000)

local co
local function sleep(ms)
  vim.defer_fn(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      result.error = debug.traceback(co, tostring(err))
      finish()
    end
  end, ms)
  coroutine.yield()
end

---@return boolean
local function wait_until(pred, timeout_ms, interval_ms)
  local deadline = now_ms() + timeout_ms
  while now_ms() < deadline do
    if pred() then
      return true
    end
    sleep(interval_ms or 50)
  end
  return pred() and true or false
end

local function type_keys(keys)
  for _, key in ipairs(keys) do
    api.nvim_input(key)
    sleep(60)
  end
end

local function chars(s)
  local keys = {}
  for ch in s:gmatch('.') do
    table.insert(keys, ch == '<' and '<lt>' or ch)
  end
  return keys
end

-- Private, for diagnostics only: the inline completion state of a buffer.
local function completor(buf)
  local cap = require('vim.lsp._capability').all.inline_completion
  return cap and cap.active[buf]
end

local function shown(buf)
  local ns = api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  if not ns then
    return {}
  end
  local marks = api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })
  local res = {}
  for _, m in ipairs(marks) do
    local text = {}
    for _, chunk in ipairs(m[4].virt_text or {}) do
      table.insert(text, chunk[1])
    end
    table.insert(res, {
      row = m[2],
      col = m[3],
      virt_text = table.concat(text),
      virt_text_pos = m[4].virt_text_pos,
      virt_lines = m[4].virt_lines and #m[4].virt_lines or 0,
    })
  end
  return res
end

local function current_item(buf)
  local c = completor(buf)
  local item = c and c.current
  if not item then
    return nil
  end
  local range
  if item.range then
    range = {
      start = { item.range.start.row, item.range.start.col },
      ['end'] = { item.range.end_.row, item.range.end_.col },
    }
  end
  local text = item.insert_text
  return {
    insert_text = type(text) == 'string' and text or vim.inspect(text),
    range = range, -- 0-based rows, byte columns
    client_id = item.client_id,
  }
end

local function main()
  local rtp = assert(env.CPC_TEST_RTP, 'CPC_TEST_RTP')
  local cmd = vim.json.decode((assert(env.CPC_TEST_CMD, 'CPC_TEST_CMD')))
  local file = assert(env.CPC_TEST_FILE, 'CPC_TEST_FILE')
  local lnum = assert(tonumber(env.CPC_TEST_LINE), 'CPC_TEST_LINE')
  local typed = assert(env.CPC_TEST_TYPE, 'CPC_TEST_TYPE')

  vim.g.loaded_python3_provider = 0 -- python's ftplugin would probe for pynvim (1 s)
  vim.lsp.log.set_level('debug')
  result.nvim_version = tostring(vim.version())
  result.has_inline_completion = vim.lsp.inline_completion ~= nil

  for _, ev in ipairs({ 'LspAttach', 'LspDetach' }) do
    api.nvim_create_autocmd(ev, {
      callback = function(args)
        event(ev, { buf = args.buf, client_id = args.data.client_id })
      end,
    })
  end
  api.nvim_create_autocmd('LspProgress', {
    callback = function(args)
      event('LspProgress', args.data.params)
    end,
  })
  api.nvim_create_autocmd('LspRequest', {
    callback = function(args)
      local r = args.data.request
      event('LspRequest', { id = args.data.request_id, method = r.method, type = r.type })
      if r.method == 'textDocument/inlineCompletion' then
        if r.type == 'pending' then
          inline.pending[args.data.request_id] = true
          inline.sent = inline.sent + 1
        else
          inline.pending[args.data.request_id] = nil
          inline.answered = inline.answered + (r.type == 'complete' and 1 or 0)
        end
      end
    end,
  })
  api.nvim_create_autocmd('LspNotify', {
    callback = function(args)
      local params = args.data.params
      if args.data.method == 'textDocument/didChange' then
        params = { version = params.textDocument.version, changes = params.contentChanges }
      elseif args.data.method == 'textDocument/didOpen' then
        params = { uri = params.textDocument.uri, languageId = params.textDocument.languageId }
      end
      event('LspNotify', { method = args.data.method, params = params })
    end,
  })

  -- The shipped setup: editors/neovim on 'runtimepath', require('cpc').setup().
  vim.opt.runtimepath:prepend(rtp)
  local cpc = require('cpc')
  -- no time budgets unless asked: what a request reads and writes must not depend on this machine's speed
  local settings = env.CPC_TEST_SETTINGS and vim.json.decode(env.CPC_TEST_SETTINGS)
    or { promptBudgetMs = 0, wordBudgetMs = 0 }
  cpc.setup(vim.tbl_extend('force', { cmd = cmd }, settings))
  local rtp_config = dofile(rtp .. '/lsp/cpc.lua')
  result.lsp_file_has_init_options = rtp_config.init_options ~= nil
  result.settings_given = settings
  result.tab_mapping = vim.fn.maparg('<Tab>', 'i', false, true).desc
  result.resolved_cmd = vim.lsp.config.cpc and vim.lsp.config.cpc.cmd
  step('setup done; cmd = ' .. table.concat(cmd, ' '))

  vim.cmd.edit(vim.fn.fnameescape(file))
  local buf = api.nvim_get_current_buf()
  result.filetype = vim.bo[buf].filetype
  step('edited ' .. file .. ' (filetype ' .. vim.bo[buf].filetype .. ')')

  local function client()
    return vim.lsp.get_clients({ bufnr = buf, name = 'cpc' })[1]
  end
  if not wait_until(function()
    local c = client()
    return c and c.initialized and completor(buf) ~= nil
  end, 30000) then
    result.error = 'the cpc client did not start, initialize and attach with inline completion in 30 s'
    return
  end
  step(('client %d initialized, offset_encoding %s, inlineCompletionProvider %s'):format(
    client().id,
    client().offset_encoding,
    vim.inspect(client().server_capabilities.inlineCompletionProvider)
  ))

  local col = tonumber(env.CPC_TEST_COL or '')
  api.nvim_win_set_cursor(0, { lnum, col or 0 })
  result.line_before = api.nvim_buf_get_lines(buf, lnum - 1, lnum, true)[1]
  type_keys({ col and 'i' or 'A' })
  if not wait_until(function()
    return api.nvim_get_mode().mode == 'i'
  end, 2000) then
    result.error = 'could not enter insert mode, mode = ' .. api.nvim_get_mode().mode
    return
  end
  step(('insert mode on line %d, %s'):format(lnum, col and ('before column ' .. col) or 'at its end'))
  type_keys(chars(typed))
  result.line_typed = api.nvim_get_current_line()
  step(('typed %q: %q'):format(typed, result.line_typed))

  -- A suggestion counts once it is shown (extmark in Neovim's namespace) and
  -- its range (if any) ends at the cursor: an item computed for an older
  -- cursor position would be applied over the wrong range.
  local function fresh()
    local item = current_item(buf)
    if not item or #shown(buf) == 0 then
      return false
    end
    if item.range then
      local cur = api.nvim_win_get_cursor(0)
      return item.range['end'][1] == cur[1] - 1 and item.range['end'][2] == cur[2]
    end
    return true
  end

  -- What :CpcStatus says now: the keys were typed right after the client
  -- initialized, so the model is still loading.
  result.status_while_typing = cpc.status_lines()

  -- Wait, without asking again: a request made while the model loads is held
  -- by the server and answered once the model is ready.
  if not wait_until(fresh, wait_ms) then
    result.error = ('no inline completion was shown within %d ms: %d requests sent, %d in flight'):format(
      wait_ms,
      inline.sent,
      vim.tbl_count(inline.pending)
    )
    result.last_item = current_item(buf)
    result.last_shown = shown(buf)
    return
  end
  local function ghost()
    local marks = shown(buf)
    return marks[1] and marks[1].virt_text or ''
  end
  result.ghost_history = { { t = now_ms(), text = ghost() } }
  if env.CPC_TEST_GROW_MS then
    -- no key: the ghost text may only grow, and each change is noted (a poll every 10 ms)
    local first = ghost()
    wait_until(function()
      local text = ghost()
      if text ~= result.ghost_history[#result.ghost_history].text then
        table.insert(result.ghost_history, { t = now_ms(), text = text })
      end
      return #text > #first and text:find('(', 1, true) ~= nil
    end, tonumber(env.CPC_TEST_GROW_MS), 10)
    step(('ghost text history: %s'):format(vim.inspect(result.ghost_history)))
  end
  result.item = current_item(buf)
  result.shown = shown(buf)
  result.cursor_before_accept = api.nvim_win_get_cursor(0)
  result.line_before_accept = api.nvim_get_current_line()
  step(('suggestion shown: %s'):format(vim.inspect(result.item)))
  if env.CPC_TEST_PAUSE then
    vim.cmd.redraw()
    local f = assert(io.open(env.CPC_TEST_PAUSE, 'w'))
    f:write('shown')
    f:close()
    wait_until(function()
      return uv.fs_stat(env.CPC_TEST_PAUSE .. '.done') ~= nil
    end, 30000)
  end

  if env.CPC_TEST_ACCEPT_WORD then
    result.status_before_word = cpc.status_lines()[1]
    result.item_before_word = current_item(buf)
    local typed_line = api.nvim_get_current_line()
    local answered = inline.answered
    api.nvim_input('<M-Right>')
    -- the ghost text the moment the word is in (polled every millisecond), and whether an answer came by then
    wait_until(function()
      return api.nvim_get_current_line() ~= typed_line
    end, 2000, 1)
    result.line_after_word = api.nvim_get_current_line()
    result.ghost_after_word = ghost()
    result.answers_before_ghost = inline.answered - answered
    if not wait_until(fresh, 10000, 10) then
      result.error = 'no answer at the cursor after the accepted word'
      return
    end
    result.ghost_after_answer = ghost()
    result.status_after_word = cpc.status_lines()[1]
    step(('accepted a word: %q, ghost %q, then %q'):format(
      result.line_after_word, result.ghost_after_word, result.ghost_after_answer))
  end

  if env.CPC_TEST_NEXT then
    local before = ghost()
    api.nvim_input('<M-n>')
    wait_until(function()
      return ghost() ~= before and ghost() ~= ''
    end, 30000, 10)
    result.ghost_after_next = ghost()
    result.items_after_next = completor(buf) and completor(buf):count_items()
    step(('next suggestion: %q, after %q'):format(result.ghost_after_next, before))
  end

  -- Accept with the keymap the setup installed (<Tab> -> vim.lsp.inline_completion.get()).
  type_keys({ '<Tab>' })
  sleep(200)
  result.mode_after_accept = api.nvim_get_mode().mode
  result.cursor_after_accept = api.nvim_win_get_cursor(0)
  result.line_after_accept = api.nvim_get_current_line()
  step(('accepted: %q'):format(result.line_after_accept))
  type_keys({ '<Esc>' })
  result.lines = api.nvim_buf_get_lines(buf, 0, -1, true)
  vim.cmd.write()
  result.status_after = vim.api.nvim_exec2('CpcStatus', { output = true }).output
  result.ok = true
end

co = coroutine.create(function()
  local ok, err = xpcall(main, debug.traceback)
  if not ok then
    result.error = err
  end
  finish()
end)
local ok, err = coroutine.resume(co)
if not ok then
  result.error = tostring(err)
  finish()
end
