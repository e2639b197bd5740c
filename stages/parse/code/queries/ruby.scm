(class name: (_) @name) @definition.class
(module name: (_) @name) @definition.module
(method name: (_) @name) @definition.function
(singleton_method name: (_) @name) @definition.function @singleton
(singleton_class (body_statement (method name: (_) @name) @definition.function)) @singleton
(call method: (identifier) @_m arguments: (argument_list . (string (string_content) @import.require))
  (#any-of? @_m "require" "require_relative" "autoload"))
