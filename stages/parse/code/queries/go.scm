(package_clause (package_identifier) @package)
(function_declaration name: (_) @name) @definition.function
(method_declaration receiver: (parameter_list (parameter_declaration type: (_) @receiver)) name: (_) @name)
  @definition.function
(type_declaration (type_spec name: (_) @name type: (struct_type (field_declaration_list) @body))) @definition.struct
(type_declaration (type_spec name: (_) @name type: (interface_type) @body)) @definition.interface
(import_spec path: (_) @import.import)
