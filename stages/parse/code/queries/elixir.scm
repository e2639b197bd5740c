(call target: (identifier) @_k (arguments . (alias) @name) (do_block) @body
  (#any-of? @_k "defmodule" "defprotocol" "defimpl")) @definition.module
(call target: (identifier) @_k (arguments . [(call target: (identifier) @name) (identifier) @name
  (binary_operator left: (call target: (identifier) @name))])
  (#any-of? @_k "def" "defp" "defmacro" "defmacrop" "defguard")) @definition.function
(call target: (identifier) @_k (arguments . (alias) @import.use)
  (#any-of? @_k "alias" "import" "require" "use"))
