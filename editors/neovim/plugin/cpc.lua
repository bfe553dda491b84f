-- :CpcToggle, :CpcSet and :CpcStatus for people who use lsp/cpc.lua without require('cpc').setup().
if vim.g.loaded_cpc or not (vim.lsp and vim.lsp.inline_completion) then
  return
end
vim.g.loaded_cpc = true
require('cpc').create_commands()
