request = function()
  return wrk.format("GET", "/")
end
