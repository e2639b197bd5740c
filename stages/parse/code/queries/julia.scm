(module_definition name: (_) @name) @definition.module
(struct_definition (type_head) @name) @definition.struct
(abstract_definition (type_head) @name) @definition.type
(function_definition (signature (call_expression . (_) @name))) @definition.function
(macro_definition (signature (call_expression . (_) @name))) @definition.function
(assignment . (call_expression . (identifier) @name) (operator) @_op (#eq? @_op "=")) @definition.function
(using_statement [(identifier) (scoped_identifier)] @import.using)
(import_statement [(identifier) (scoped_identifier)] @import.import)
(import_statement (selected_import . [(identifier) (scoped_identifier)] @import.import))
(call_expression . (identifier) @_i (argument_list (string_literal) @import.include) (#eq? @_i "include"))
